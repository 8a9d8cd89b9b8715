"""emu/apiserver."""
