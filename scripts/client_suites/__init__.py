"""Helpers of ``scripts/client-suites.py``: pytest plugins loaded into the clients' own suites
(``plugin``: the deselection list and the results file; ``kr8s_cluster``: kr8s's cluster
fixture for an existing cluster), the stand-in for the official client's unshipped
``kubernetes.e2e_test.base`` (``e2e_base``) and the list of deselected tests (``deselected``)."""
