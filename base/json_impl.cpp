// The single translation unit that compiles Boost.JSON for the whole program.
// Boost.JSON is used header-only: every other file includes <boost/json.hpp>, which
// only declares, and linking two copies of src.hpp would define everything twice.
#include <boost/json/src.hpp>
