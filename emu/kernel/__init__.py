"""emu/kernel."""
