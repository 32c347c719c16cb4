"""The texts the explorer's tests read (tests/explore/): a line of Romeo's, the characters of its tokenizer, and a
translation model's pairs."""

TEXT = "ROMEO:\nBut, soft! what light through yonder window breaks?"
CHARS = TEXT + " abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.,;:!?'-\n"
PAIRS = [("15 juillet 2031", "2031-07-15"), ("5 mars 2021", "2021-03-05"), ("1 mai 2000", "2000-05-01")]
