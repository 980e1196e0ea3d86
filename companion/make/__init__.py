"""Making a board: its flash image (image) and writing it to the board (flash)."""
