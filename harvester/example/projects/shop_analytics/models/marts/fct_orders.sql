-- One row per order placed by a real (non-test) customer, with its line totals,
-- the money collected for it, and how the order ended up.
with orders as (

    select * from {{ ref('stg_orders') }}

),

customers as (

    select * from {{ ref('stg_customers') }}

),

order_lines as (

    select
        order_id,
        count(*) as line_count,
        count(distinct product_id) as distinct_products,
        sum(quantity) as units,
        sum(net_amount) as order_amount
    from {{ ref('stg_order_items') }}
    group by order_id

),

collected as (

    select
        order_id,
        sum(amount) as amount_paid
    from {{ ref('stg_payments') }}
    where payment_status = 'succeeded'
    group by order_id

)

select
    orders.order_id,
    orders.customer_id,
    orders.order_date,
    orders.status,
    orders.sales_channel,
    coalesce(order_lines.line_count, 0) as line_count,
    coalesce(order_lines.distinct_products, 0) as distinct_products,
    coalesce(order_lines.units, 0) as units,
    coalesce(order_lines.order_amount, 0) as order_amount,
    coalesce(collected.amount_paid, 0) as amount_paid,
    case
        when orders.status = 'completed' then 'revenue'
        when orders.status in ('pending', 'shipped') then 'open'
        else 'lost'
    end as order_outcome,
    case
        when coalesce(order_lines.order_amount, 0) >= 150 then 'large'
        when coalesce(order_lines.order_amount, 0) >= 50 then 'medium'
        else 'small'
    end as order_size
from orders
inner join customers
    on orders.customer_id = customers.customer_id
left join order_lines
    on orders.order_id = order_lines.order_id
left join collected
    on orders.order_id = collected.order_id
where customers.is_test_account is not true
