"""The Kubernetes HTTP API in front of the emulated API server (docs/http.md).

- `gateway`: an HTTP request in, the same `ApiRequest` the in-process client sends out, over the
  emulated network (so faults reach HTTP callers); discovery, OpenAPI, Tables, logs, scale;
- `server`: the aiohttp server (`emu.HttpServer`), `serve` and `command`: ``emu serve``;
- `transport`: in-process httpx/httpx2 transports (`emu.httpx_transport`,
  `emu.lightkube_client`) on virtual time;
- `expose`: ``--expose svc/NAME:PORT``; `tls`: the certificate for ``--token``; `protobuf`: the
  bodies kubectl's typed generators send.

This package sits beside the CLI at the top of the layers: it uses `emu.simulation` and
`emu.apiserver`, and nothing below imports it.
"""
