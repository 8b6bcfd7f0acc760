-- Revenue per customer per calendar month (one row per customer and month with
-- at least one completed order), next to the money actually collected that month.
with completed_orders as (

    select
        customer_id,
        {{ shop_calendar.month_start('order_date') }} as revenue_month,
        order_id,
        order_amount
    from {{ ref('fct_orders') }}
    where status = 'completed'

),

monthly_orders as (

    select
        customer_id,
        revenue_month,
        count(distinct order_id) as completed_orders,
        sum(order_amount) as revenue
    from completed_orders
    group by customer_id, revenue_month

),

monthly_payments as (

    select
        customer_id,
        {{ shop_calendar.month_start('paid_date') }} as payment_month,
        sum(amount) as amount_collected
    from {{ ref('stg_payments') }}
    where payment_status = 'succeeded'
    group by customer_id, payment_month

)

select
    monthly_orders.customer_id,
    monthly_orders.revenue_month,
    monthly_orders.completed_orders,
    monthly_orders.revenue,
    coalesce(monthly_payments.amount_collected, 0) as amount_collected,
    {{ shop_utils.safe_ratio('coalesce(monthly_payments.amount_collected, 0)', 'monthly_orders.revenue') }} as collection_rate
from monthly_orders
left join monthly_payments
    on monthly_orders.customer_id = monthly_payments.customer_id
    and monthly_orders.revenue_month = monthly_payments.payment_month
