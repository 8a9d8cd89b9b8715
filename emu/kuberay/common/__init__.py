"""emu/kuberay/common."""
