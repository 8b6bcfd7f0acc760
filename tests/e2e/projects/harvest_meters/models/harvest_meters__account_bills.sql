-- One row per account and month it used water in: usage above the free allowance, billed at its tariff.
with usage as (

    select * from {{ ref('harvest_meters__monthly_usage') }}

),

devices as (

    select * from {{ ref('stg_harvest_meters__devices') }}

),

accounts as (

    select * from {{ ref('stg_harvest_meters__accounts') }}

),

per_account as (

    select
        devices.account_id,
        usage.usage_month,
        sum(usage.used_m3) as used_m3
    from usage
    inner join devices
        on usage.meter_id = devices.meter_id
    group by 1, 2

)

select
    per_account.account_id,
    per_account.usage_month,
    per_account.used_m3,
    greatest(per_account.used_m3 - coalesce(accounts.free_m3, 0), 0) as billable_m3,
    round(greatest(per_account.used_m3 - coalesce(accounts.free_m3, 0), 0) * accounts.rate_per_m3, 2) as amount_due
from per_account
inner join accounts
    on per_account.account_id = accounts.account_id
