"""Shared by more than one program; imports nothing outside core/."""
