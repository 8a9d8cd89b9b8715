"""emu/kube."""
