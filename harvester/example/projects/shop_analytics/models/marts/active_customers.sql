-- Customers who completed at least one order in the last 90 days (counted back
-- from today), with what they bought in that window.
with recent_orders as (

    select
        customer_id,
        count(distinct order_id) as recent_orders,
        sum(order_amount) as recent_revenue,
        max(order_date) as latest_order_date
    from {{ ref('fct_orders') }}
    where status = 'completed'
        and order_date >= current_date - interval 90 day
    group by customer_id

)

select
    dim_customers.customer_id,
    dim_customers.customer_name,
    dim_customers.customer_segment,
    recent_orders.recent_orders,
    recent_orders.recent_revenue,
    recent_orders.latest_order_date
from recent_orders
inner join {{ ref('dim_customers') }} as dim_customers
    on recent_orders.customer_id = dim_customers.customer_id
