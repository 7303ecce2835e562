"""Change plans: the identity a check-mode run planned from, the plan document and checking it."""
