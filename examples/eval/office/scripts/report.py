import csv


def load_staff(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def total_salary(rows):
    return sum(int(r["salary"]) for r in rows)


def main():
    rows = load_staff("staff.csv")
    print("total", total_salary(rows))


if __name__ == "__main__":
    main()
