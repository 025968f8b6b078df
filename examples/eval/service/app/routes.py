from app.handlers import list_orders, create_order, order_summary
from app.models import Customer

ROUTES = {
    "GET /orders": list_orders,
    "POST /orders": create_order,
    "GET /orders/summary": order_summary,
}


def known_customer(name):
    return Customer(name=name, email=f"{name.lower()}@example.com")
