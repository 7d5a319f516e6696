"""hpcnn's test suite, a package so that every test module has a unique dotted name and imports its
helpers as tests.support.<module> (the layout: tests/README.md)."""
