-- live orders only: cancelled orders never count toward revenue
select order_id, customer_id, status, amount, ordered_on
from {{ ref('shop_orders') }}
where status <> 'cancelled'
