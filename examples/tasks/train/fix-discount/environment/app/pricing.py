def apply_discount(price, percent):
    """Price after taking `percent` percent off, rounded to 2 decimals."""
    return round(price - price * percent, 2)
