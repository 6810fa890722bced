"""Hostile and careless inputs against the control plane.

`control_cases` names each input a hostile probe got a 500 for and the typed 4xx
it must get now; `fuzz` derives many more requests from the control plane's own
OpenAPI document (every route, hostile values in every place). The tests
(tests/control/api/test_hostile_inputs.py) assert every status.
"""
