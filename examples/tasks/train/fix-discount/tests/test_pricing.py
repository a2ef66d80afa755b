import unittest

from pricing import apply_discount


class DiscountTest(unittest.TestCase):
    def test_values(self):
        self.assertEqual(apply_discount(200, 10), 180.0)
        self.assertEqual(apply_discount(19.99, 0), 19.99)
        self.assertEqual(apply_discount(50, 100), 0.0)
        self.assertEqual(apply_discount(80, 25), 60.0)


if __name__ == "__main__":
    unittest.main()
