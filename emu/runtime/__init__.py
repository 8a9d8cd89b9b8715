"""emu/runtime."""
