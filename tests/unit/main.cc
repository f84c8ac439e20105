// The doctest entry point of the unit tests (tests/unit/*.cc).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
