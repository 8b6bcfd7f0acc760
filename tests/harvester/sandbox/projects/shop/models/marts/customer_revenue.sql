select
    c.customer_id,
    c.full_name,
    coalesce(c.is_member, false) as is_member,
    count(s.order_id) as shipped_orders,
    coalesce(sum(s.amount), 0) as shipped_amount
from {{ ref('shop_customers') }} as c
left join {{ ref('int_shipped') }} as s on s.customer_id = c.customer_id
group by 1, 2, 3
