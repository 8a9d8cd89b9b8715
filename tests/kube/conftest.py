"""Tests of the Kubernetes built-ins: each installs a cluster in the ``sim`` fixture's world.

Manifests and tiny container programs live in ``kube_helpers.py`` (imported by name: pytest puts
this directory on ``sys.path``).
"""
