def parse_money(text):
    """'12.50' -> 1250 (cents)."""
    whole, _, cents = text.partition(".")
    return int(whole) * 100 + int((cents + "00")[:2])


def format_money(cents):
    return f"{cents // 100}.{cents % 100:02d}"
