import unittest

from stats import mean


class MeanTest(unittest.TestCase):
    def test_values(self):
        self.assertEqual(mean([2, 4, 6]), 4.0)
        self.assertEqual(mean([1, 2]), 1.5)
        self.assertEqual(mean([7]), 7.0)
        self.assertEqual(mean([]), 0.0)


if __name__ == "__main__":
    unittest.main()
