// Linked into dlaunch-mpi-bootstrap in sanitizer builds only (DLAUNCH_SANITIZE).
//
// Open MPI is built without frame pointers, so ASan's fast unwinder records one
// frame for each allocation Open MPI makes and leaks at MPI_Finalize; with one
// frame, the libmpi entries of tests/sanitizers/lsan.supp cannot match. The slow
// unwinder sees the whole stack. It is slow, so only this short-lived helper gets
// it; dlaunch keeps the fast one. ASAN_OPTIONS still overrides this.
extern "C" const char* __asan_default_options() { return "fast_unwind_on_malloc=0"; }
