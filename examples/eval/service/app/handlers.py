from app.models import Order
from app.util import parse_money, format_money


def list_orders(store, status=None, limit=25):
    orders = [o for o in store if status is None or o.status == status]
    return orders[:limit]


def create_order(store, customer, amount, note=""):
    order = Order(id=len(store) + 1, customer=customer, total_cents=parse_money(amount), status="new")
    store.append(order)
    return order


def order_summary(order):
    return f"#{order.id} {order.customer}: {format_money(order.total_cents)}"


def cancel_order(order):
    order.status = "cancelled"
    return order
