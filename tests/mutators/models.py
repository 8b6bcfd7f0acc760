"""Original dbt-style model files used by the mutator tests (written for this project)."""

ORDERS = """{{ config(materialized='table', tags=['finance']) }}

with orders as (

    select * from {{ ref('stg_orders') }}

),

payments as (

    select
        order_id,
        sum(coalesce(amount, 0)) as amount,
        count(distinct payment_method) as n_methods,
        count(*) as n_payments
    from {{ ref('stg_payments') }}
    where status = 'success'
      and amount > 0
      and payment_method in ('card', 'bank_transfer', 'coupon')
    group by 1

),

customers as (
    select c.customer_id, c.first_name, c.created_at, c.updated_at
    from {{ source('shop', 'customers') }} as c
    where c.is_deleted is not true
      and c.email is not null
)

select
    o.order_id,
    o.customer_id,
    cu.first_name,
    o.ordered_at,
    p.amount - coalesce(o.discount_amount, 0) as net_amount,
    p.amount * {{ var('fx_rate', 1) }} as amount_fx,
    case
        when o.status = 'returned' then 'refund'
        when o.status = 'shipped' then 'done'
        else 'open'
    end as order_state,
    coalesce(o.is_gift, false) as is_gift,
    row_number() over (partition by o.customer_id, o.store_id order by o.ordered_at desc) as recency_rank,
    {{ dbt_utils.generate_surrogate_key(['o.order_id', 'o.customer_id']) }} as order_key
from orders as o
left join payments as p
    on o.order_id = p.order_id
   and o.store_id = p.store_id
   and p.n_payments > 0
inner join customers as cu on o.customer_id = cu.customer_id
where o.ordered_at >= current_date - interval '30 days'
  and o.shipped_at is distinct from o.cancelled_at
  and (o.is_test or o.is_internal) is not true
"""

INCREMENTAL = """{{
    config(
        materialized='incremental',
        unique_key='event_id'
    )
}}

{% set lookback_days = var('lookback_days', 3) %}

select
    e.event_id,
    e.user_id,
    date_trunc('day', e.occurred_at) as event_day,
    max(e.occurred_at) as last_seen_at,
    min(e.occurred_at) as first_seen_at,
    avg(e.duration_ms) / 1000 as avg_duration_s
from {{ ref('stg_events') }} as e
where e.event_type != 'heartbeat'
  and not coalesce(e.is_bot, false)
{% if is_incremental() %}
  and e.occurred_at > (select max(last_seen_at) from {{ this }})
{% endif %}
group by 1, 2, 3
having count(e.event_id) >= 2

union

select event_id, user_id, event_day, last_seen_at, first_seen_at, avg_duration_s
from {{ ref('events_backfill') }}
"""

DAILY = """{{ config(materialized='view') }}

{%- set channels = ['web', 'app'] -%}

with sessions as (
    select distinct
        s.session_id,
        s.user_id,
        s.started_at,
        s.ended_at
    from {{ ref('stg_sessions') }} as s
    where s.ended_at is null
       or s.is_valid is not false
),

pivoted as (
    select
        user_id,
        {% for ch in channels %}
        sum(case when channel = '{{ ch }}' then 1 else 0 end) as {{ ch }}_sessions,
        {% endfor %}
        min(started_at) as first_started_at,
        max(ended_at) as last_ended_at,
        count(*) as n_sessions
    from sessions
    group by user_id
),

labelled as (
    select
        p.user_id,
        p.n_sessions,
        date_trunc('month', p.first_started_at) as cohort_month,
        case when p.n_sessions > 10 then 'power' else 'casual' end as segment
    from pivoted as p
    left join {{ ref('users') }} as u
        on p.user_id = u.user_id
       and u.region = 'emea'
    where p.user_id is not distinct from u.user_id
       or u.user_id is null
)

select * from labelled
where cohort_month >= '{{ var("start_month", "2020-01-01") }}'
qualify row_number() over (partition by user_id order by n_sessions) = 1

union all

select * from {{ ref('labelled_backfill') }}
"""

ALL_MODELS = {"orders": ORDERS, "incremental": INCREMENTAL, "daily": DAILY}
