"""The house rules, held as tests: floors, includes, public interfaces, warnings, docs, the test layout."""
