from dataclasses import dataclass


@dataclass
class Order:
    id: int
    customer: str
    total_cents: int
    status: str


@dataclass
class Customer:
    name: str
    email: str
