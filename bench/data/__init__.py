"""Corpora: public text, clinical notes, sentence splitting; and the alignment of words to released pieces."""
