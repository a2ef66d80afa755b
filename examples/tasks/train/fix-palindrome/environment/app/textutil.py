def is_palindrome(s):
    """True if s reads the same backwards, ignoring case and non-letters."""
    cleaned = [c for c in s if c.isalpha()]
    return cleaned == cleaned[::-1]
