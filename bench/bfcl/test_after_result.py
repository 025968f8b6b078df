"""Tests of after_result.py (no BFCL needed): python3 bench/bfcl/test_after_result.py"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import after_result as ar  # noqa: E402


class RightCalls(unittest.TestCase):
    def test_first_accepted_value_and_left_out_optionals(self):
        truth = [{"math.factorial": {"number": [5], "unit": ["", "none"], "exact": [""]}}]
        calls = ar.right_calls(truth, {"math_factorial"})
        self.assertEqual(len(calls), 1)
        self.assertEqual(calls[0]["name"], "math_factorial")
        # `unit` may be left out, but "" is BFCL's mark for that, so the call leaves it out;
        # `exact` has nothing else to give.
        self.assertEqual(json.loads(calls[0]["arguments"]), {"number": 5})

    def test_object_arguments_choose_their_members_values_too(self):
        truth = [{"find_home": {"budget": [{"min": [300000], "max": [400000, 400001], "note": [""]}],
                                "rooms": [[{"kind": ["bed"]}, {"kind": ["bath"]}]]}}]
        calls = ar.right_calls(truth, {"find_home"})
        self.assertEqual(json.loads(calls[0]["arguments"]),
                         {"budget": {"min": 300000, "max": 400000},
                          "rooms": [{"kind": "bed"}, {"kind": "bath"}]})

    def test_an_undeclared_function_gives_no_calls(self):
        self.assertIsNone(ar.right_calls([{"other": {"a": [1]}}], {"math_factorial"}))

    def test_second_turn_pairs_each_call_with_its_result(self):
        calls = ar.right_calls([{"f": {"a": [1]}}, {"g": {"b": ["x"]}}], {"f", "g"})
        convo = ar.second_turn([{"role": "user", "content": "q"}], calls)
        self.assertEqual([m["role"] for m in convo], ["user", "assistant", "tool", "tool"])
        ids = [c["id"] for c in convo[1]["tool_calls"]]
        self.assertEqual(ids, [m["tool_call_id"] for m in convo[2:]])
        self.assertEqual(len(set(ids)), 2)


class Judge(unittest.TestCase):
    answered = [{"name": "f", "arguments": '{"a": 1, "b": "x"}'}]

    def test_text_is_right(self):
        self.assertEqual(ar.judge([], self.answered), "text")

    def test_the_same_call_in_other_key_order_is_a_repeat(self):
        made = [{"name": "f", "arguments": '{"b": "x", "a": 1}'}]
        self.assertEqual(ar.judge(made, self.answered), "repeat")

    def test_other_arguments_are_another_call(self):
        made = [{"name": "f", "arguments": '{"a": 2, "b": "x"}'}]
        self.assertEqual(ar.judge(made, self.answered), "call")
        both = made + self.answered
        self.assertEqual(ar.judge(both, self.answered), "call")


if __name__ == "__main__":
    unittest.main()
