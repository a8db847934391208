"""The query's input: the records of a key in the files each batch read (``records``), and what each
source read per batch from the checkpoint's offsets (``sources``)."""
