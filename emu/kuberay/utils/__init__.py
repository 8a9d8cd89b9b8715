"""emu/kuberay/utils."""
