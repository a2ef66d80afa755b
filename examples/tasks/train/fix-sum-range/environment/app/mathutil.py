def total(n):
    """Return 1 + 2 + ... + n, or 0 when n <= 0."""
    s = 0
    for i in range(n):
        s += i
    return s
