"""A stand-in for ``kubernetes.e2e_test.base`` (and ``kubernetes.aio.e2e_test.base``), which the
official client's integration tests import but its source distribution does not ship.

``client-suites.py`` copies this file into the unpacked distribution as those modules. Like the
upstream helper it reads the kubeconfig ``KUBECONFIG`` names (the upstream one falls back to
guessing a local API server; here a missing ``KUBECONFIG`` is an error)."""

from __future__ import annotations

import os

#: True where this file stands in for ``kubernetes.aio.e2e_test.base`` (the asyncio flavour).
_AIO = __name__.startswith("kubernetes.aio.")


def get_e2e_configuration():  # type: ignore[no-untyped-def]
    """A client ``Configuration`` for the cluster ``KUBECONFIG`` names."""
    path = os.environ.get("KUBECONFIG")
    if not path or not os.path.exists(path):
        raise RuntimeError(f"KUBECONFIG must name a kubeconfig file (it is {path!r})")
    if _AIO:
        import asyncio

        from kubernetes.aio import config as aio_config
        from kubernetes.aio.client import Configuration as AioConfiguration

        aio_cfg = AioConfiguration()
        asyncio.run(aio_config.load_kube_config(config_file=path,
                                                client_configuration=aio_cfg))
        aio_cfg.assert_hostname = False
        return aio_cfg
    from kubernetes import config
    from kubernetes.client import Configuration

    cfg = Configuration()
    config.load_kube_config(config_file=path, client_configuration=cfg)
    cfg.assert_hostname = False
    return cfg
