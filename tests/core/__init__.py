"""Tests of the C++ core (csrc/), one folder per csrc folder."""
