from tally import count_words


def test_counts_words():
    assert count_words("one two  three") == 3


def test_empty():
    assert count_words("") == 0
