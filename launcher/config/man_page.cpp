// The manual page. What the tables know (flags, subcommands, exit codes) is
// generated from them; the prose around it is written here once.
#include "launcher/config/man_page.hpp"

#include <fmt/format.h>

#include "base/defaults.hpp"
#include "launcher/config/flag_table.hpp"
#include "launcher/config/subcommands.hpp"

namespace dlaunch::launcher {

std::string RoffEscape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\')
      out += "\\e";
    else if (c == '-')
      out += "\\-";
    else
      out += c;
  }
  // A line starting with '.' or '\'' would be read as a request.
  if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out.insert(0, "\\&");
  return out;
}

namespace {

std::string Bold(std::string_view s) { return "\\fB" + RoffEscape(s) + "\\fR"; }
std::string Italic(std::string_view s) { return "\\fI" + RoffEscape(s) + "\\fR"; }

std::string Header(const std::string& version) {
  return fmt::format(
      ".TH DLAUNCH 1 \"\" \"dlaunch {}\" \"User Commands\"\n"
      // No hyphenation and a ragged right: a variable or a flag split by a
      // hyphen at the line's end would be typed back wrong.
      ".nh\n.ad l\n"
      ".SH NAME\n"
      "dlaunch \\- a native launcher for distributed training (torchrun and mpirun in one binary)\n"
      ".SH SYNOPSIS\n"
      "{} [\\fIflags\\fR] {} \\fICOMMAND\\fR [\\fIARGS\\fR...]\n.br\n"
      "{} [\\fIflags\\fR] \\fISCRIPT.py\\fR [\\fIARGS\\fR...]\n.br\n",
      RoffEscape(version), Bold("dlaunch"), Bold("--"), Bold("dlaunch"));
}

std::string Synopses() {
  std::string out;
  for (const Subcommand& s : Subcommands())
    out += fmt::format("{} {} {}\n.br\n", Bold("dlaunch"), Bold(s.name), RoffEscape(s.args));
  return out;
}

constexpr const char* kDescription = R"(.SH DESCRIPTION
dlaunch starts N worker processes on a node, gives each the variables PyTorch,
Open MPI, Azure ML, TensorFlow and Horovod expect, supervises them, and stops
the whole job, with the real exit code and the root cause, when one of them
fails. It takes torchrun's flags in both spellings and
python \-m torch.distributed.launch's legacy switches.
.PP
After \fB\-\-\fR the command runs exactly as written. In torchrun's form
(\fBdlaunch\fR [\fIflags\fR] \fISCRIPT.py\fR) the interpreter,
\fB$PYTHON_EXEC\fR else \fBpython3\fR, is put before the script with \fB\-u\fR.
With no flags at all (\fBdlaunch \-\- python train.py\fR) dlaunch runs one
worker per visible GPU, else one.
.PP
Across nodes dlaunch either joins a TCP rendezvous (\fB\-\-rdzv\-endpoint\fR,
run on every node), starts the whole job from a head node over ssh or pdsh
(\fB\-\-hostfile\fR, \fB\-H\fR), or works the layout out from what started
it: Slurm, mpirun, Kubeflow's PET_ variables, Azure ML or TF_CONFIG.
)";

std::string SubcommandsSection() {
  std::string out = ".SH SUBCOMMANDS\n";
  for (const Subcommand& s : Subcommands()) {
    out += fmt::format(".TP\n{} {}\n{}.\n.br\n", Bold(s.name), RoffEscape(s.args), RoffEscape(s.summary));
    out += fmt::format("Example: {}\n.br\n", Bold(s.example));
    out += fmt::format("Its own help: {}.\n", Bold(fmt::format("dlaunch {} --help", s.name)));
  }
  return out;
}

// One flag: its synopsis, help line, values and the other launchers' spelling.
std::string FlagEntry(const Flag& f) {
  std::string head = f.short_name ? Bold(fmt::format("-{}", f.short_name)) + ", " : "";
  head += Bold(fmt::format("--{}", f.name));
  if (f.arity == Arity::kValue) head += " " + Italic(f.doc.value);
  if (f.arity == Arity::kOptionalValue) head += "[=" + Italic(f.doc.value) + "]";
  std::string out = fmt::format(".TP\n{}\n{}.\n", head, RoffEscape(f.help));
  std::string_view choices = f.doc.choices;
  if (!choices.empty()) {
    std::string list;
    for (char c : choices) list += c == ' ' ? std::string(", ") : std::string(1, c);
    out += fmt::format("Values: {}.\n", RoffEscape(list));
  }
  std::string torchrun_name = f.name;
  for (char& c : torchrun_name)
    if (c == '-') c = '_';
  std::string_view others = f.doc.others;
  if (f.doc.torchrun && !others.empty())
    out += fmt::format("torchrun: {}; {}.\n", Bold("--" + torchrun_name), RoffEscape(others));
  else if (f.doc.torchrun)
    out += fmt::format("torchrun: {}.\n", Bold("--" + torchrun_name));
  else if (!others.empty())
    out += fmt::format("{}.\n", RoffEscape(others));
  return out;
}

std::string OptionsSection() {
  std::string out = R"(.SH OPTIONS
Every flag takes \fB\-\-a\-b\fR or \fB\-\-a_b\fR, \fB\-\-flag value\fR or
\fB\-\-flag=value\fR, and \fBPET_\fR\fIFLAG\fR in the environment as its default
(\fBPET_NPROC_PER_NODE\fR for \fB\-\-nproc\-per\-node\fR), as torchrun does.
Bad input gets one line naming the flag and the value, and exit status 2.
Flags end at the first word that is not one (the script) or at \fB\-\-\fR.
)";
  for (const Flag& f : Flags()) out += FlagEntry(f);
  return out;
}

std::string Entry(std::string_view name, std::string_view text) {
  return fmt::format(".TP\n{}\n{}\n", Bold(name), RoffEscape(text));
}

std::string EnvironmentSection() {
  std::string out = ".SH ENVIRONMENT\nRead by dlaunch:\n";
  out += Entry("PET_<FLAG>", "the default of --<flag> (torchrun's convention; Kubeflow sets them).");
  out += Entry("DLAUNCH_RDZV_TOKEN", "the rendezvous secret, when --rdzv-token is not given.");
  out += Entry("PYTHON_EXEC", "the interpreter of torchrun's form (default python3).");
  out += Entry("CUDA_VISIBLE_DEVICES", "the GPUs --nproc-per-node auto and gpu count, and --pin-gpu divides.");
  out += Entry("SLURM_NODEID, SLURM_NNODES, SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS, SLURM_JOB_NODELIST",
               "under srun: node rank, node count, the master (the first host) and one dlaunch per task.");
  out += Entry("OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE",
               "under mpirun: the node rank (one dlaunch per node) or the worker's rank (one per worker).");
  out += Entry("AZ_BATCH_MASTER_NODE, AZ_BATCHAI_MPI_MASTER_NODE", "under Azure ML: the master.");
  out += Entry("TF_CONFIG", "a TensorFlow cluster: this node's role and index.");
  out += Entry("TMPDIR",
               "where the private and run directories and dlaunch job's hostfile are made (default /tmp); one that "
               "another user could replace them in (not ours or root's, or writable by all without the sticky bit) "
               "is passed over for /tmp, saying so once.");
  out += Entry("XDG_RUNTIME_DIR", "the live view's directory, $XDG_RUNTIME_DIR/dlaunch, when it is the user's.");
  out += R"(.PP
Set in every worker: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
GROUP_WORLD_SIZE, NODE_RANK, ROLE_NAME, ROLE_RANK, ROLE_WORLD_SIZE, MASTER_ADDR,
MASTER_PORT, TORCHELASTIC_RUN_ID, TORCHELASTIC_RESTART_COUNT,
TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_USE_AGENT_STORE, TORCHELASTIC_ERROR_FILE,
NCCL_ASYNC_ERROR_HANDLING and TORCH_NCCL_ASYNC_ERROR_HANDLING (each unless set),
OMP_NUM_THREADS=1 (unless set, with more than one worker), DLAUNCH_JOB_MARK,
DLAUNCH_PROGRESS_FILE (an empty file of the worker's own: writing a larger step
number there is progress for \fB\-\-max\-no\-progress\-restarts\fR), and
for Python workers PYTHONPATH, DLAUNCH_STACKS_DIR and DLAUNCH_STACKS_SIGNAL (the
stack hook).
.PP
With \fB\-\-launch\-mode per\-node\fR: NODE_RANK, GROUP_RANK, NNODES,
GROUP_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, AZ_BATCH_MASTER_NODE and
AZ_BATCHAI_MPI_MASTER_NODE instead.
.PP
\fB\-\-env ompi\fR: OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE, OMPI_COMM_WORLD_NODE_RANK,
OMPI_UNIVERSE_SIZE. \fB\-\-env azure\fR: AZ_BATCH_MASTER_NODE,
AZ_BATCHAI_MPI_MASTER_NODE, AZUREML_MPI_HOSTFILE. \fB\-\-env horovod\fR:
HOROVOD_RANK, HOROVOD_SIZE, HOROVOD_LOCAL_RANK, HOROVOD_LOCAL_SIZE,
HOROVOD_CROSS_RANK, HOROVOD_CROSS_SIZE, HOROVOD_HOSTNAME, and the gloo rendezvous
store that node rank 0 serves at MASTER_PORT + 1: HOROVOD_GLOO_RENDEZVOUS_ADDR,
HOROVOD_GLOO_RENDEZVOUS_PORT, HOROVOD_CONTROLLER, HOROVOD_CPU_OPERATIONS,
HOROVOD_GLOO_IFACE. \fB\-\-roles\fR: TF_CONFIG.
)";
  return out;
}

std::string ExitStatusSection() {
  std::string out = ".SH EXIT STATUS\n";
  out += Entry("0", "every rank on every node exited 0.");
  out +=
      Entry("N", fmt::format("the first failed rank's exit code (the root cause is printed), on every node of the job; "
                             "a rank's own {} or {} is reported as {}, since dlaunch gives those itself.",
                             base::kExitNoProgress, base::kExitHang, base::kExitWorkerClash));
  out += Entry("128+N", "the first failed rank was killed by signal N (or dlaunch was stopped by it).");
  out += Entry("1", "dlaunch itself failed at run time (a lost node or coordinator, an I/O error).");
  for (const base::ExitCodeRow& row : base::kExitCodes) out += Entry(fmt::format("{}", row.code), row.meaning);
  return out;
}

constexpr const char* kFiles = R"(.SH FILES
.TP
\fI$XDG_RUNTIME_DIR/dlaunch/\fR, else \fI/tmp/dlaunch\-UID/\fR
The live view's directory (mode 0700): each running dlaunch listens on
\fIRUNID.PID.sock\fR (mode 0600) for \fBdlaunch status\fR and \fBdlaunch stacks\fR;
\fIrdzv\-token\fR, the user's loopback rendezvous token; \fIhook\-HASH/\fR, the
stack hook (sitecustomize.py) put on Python workers' PYTHONPATH.
.TP
\fIDIR/RUNID/attempt_N/LOCAL_RANK/\fR{\fIstdout.log\fR,\fIstderr.log\fR}
Each rank's output with \fB\-\-log\-dir\fR \fIDIR\fR (directories mode 0700).
.TP
\fI$TMPDIR/dlaunch\-XXXXXX/\fR
The run directory without \fB\-\-log\-dir\fR: stacks\-N.txt of hang reports;
kept only when it holds logs or stacks. A second, private one holds the error
files and is removed when dlaunch ends, also when it is killed.
.TP
\fIdlaunch\-mpi\-bootstrap\fR
Beside dlaunch: the helper that agrees on the rendezvous through Open MPI under
mpirun, so that dlaunch itself never loads libmpi.
)";

constexpr const char* kExamples = R"(.SH EXAMPLES
One node, the command as given; torchrun's form; torch.distributed.launch's; a container entrypoint:
.RS 4
.nf
dlaunch \-\-nproc\-per\-node 4 \-\- /usr/bin/python3 train.py \-\-epochs 3
dlaunch \-\-nproc_per_node=4 train.py \-\-epochs 3
dlaunch \-\-legacy\-launch \-\-nproc_per_node 4 train.py
dlaunch \-\- python train.py
.fi
.RE
Several nodes: the same command on each, meeting at a rendezvous:
.RS 4
.nf
export DLAUNCH_RDZV_TOKEN=$(cat ~/.dlaunch\-token)
dlaunch \-\-nnodes 4 \-\-nproc\-per\-node 8 \-\-rdzv\-endpoint head:29400 \-\-rdzv\-id job42 \-\- python train.py
.fi
.RE
From a head node over ssh (mpirun's way), and what it would run:
.RS 4
.nf
dlaunch \-\-hostfile hosts.txt \-\-nproc\-per\-node 8 \-\- python train.py
dlaunch \-\-explain \-H n1:8,n2:8 \-x NCCL_DEBUG \-\- python train.py
.fi
.RE
Under mpirun and Slurm, one dlaunch per node:
.RS 4
.nf
mpirun \-np 2 \-\-map\-by ppr:1:node \-\-bind\-to none dlaunch \-\-nproc\-per\-node 4 \-\- python train.py
srun \-N2 \-\-ntasks\-per\-node=1 dlaunch \-\-nproc\-per\-node 4 \-\- python train.py
.fi
.RE
A job spec, a running job, and a stand-alone coordinator:
.RS 4
.nf
dlaunch job pytorch.yml \-H n1,n2
dlaunch status job42 \-\-watch
dlaunch stacks job42
dlaunch coordinator \-\-listen 10.0.0.1:29400 \-\-rdzv\-token\-file /etc/dlaunch/token
.fi
.RE
.SH SEE ALSO
\fBmpirun\fR(1), \fBsrun\fR(1), \fBssh\fR(1), \fBpdsh\fR(1);
README.md and its guides (docs/SECURITY.md among them) in /usr/share/doc/dlaunch.
)";

}  // namespace

std::string ManPage(const std::string& version) {
  return Header(version) + Synopses() + kDescription + SubcommandsSection() + OptionsSection() + EnvironmentSection() +
         ExitStatusSection() + kFiles + kExamples;
}

}  // namespace dlaunch::launcher
