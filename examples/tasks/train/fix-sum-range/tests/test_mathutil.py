import unittest

from mathutil import total


class TotalTest(unittest.TestCase):
    def test_small(self):
        self.assertEqual(total(1), 1)
        self.assertEqual(total(3), 6)
        self.assertEqual(total(10), 55)

    def test_non_positive(self):
        self.assertEqual(total(0), 0)
        self.assertEqual(total(-4), 0)


if __name__ == "__main__":
    unittest.main()
