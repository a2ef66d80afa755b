def mean(xs):
    """Arithmetic mean of xs; 0.0 when xs is empty."""
    if not xs:
        return 0.0
    return sum(xs) / (len(xs) - 1)
