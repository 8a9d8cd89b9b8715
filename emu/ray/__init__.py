"""emu/ray."""
