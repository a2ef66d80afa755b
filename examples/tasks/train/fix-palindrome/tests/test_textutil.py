import unittest

from textutil import is_palindrome


class PalindromeTest(unittest.TestCase):
    def test_true(self):
        self.assertTrue(is_palindrome("Racecar"))
        self.assertTrue(is_palindrome("A man, a plan, a canal: Panama"))
        self.assertTrue(is_palindrome(""))

    def test_false(self):
        self.assertFalse(is_palindrome("hello"))
        self.assertFalse(is_palindrome("Ab, ca"))


if __name__ == "__main__":
    unittest.main()
