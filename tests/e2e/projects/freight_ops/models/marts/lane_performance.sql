-- Delivered shipments per lane: volume, punctuality, average transit time and weight,
-- and the lane's rank by volume among the lanes leaving the same hub.
with lanes as (

    select
        lane,
        origin_hub,
        count(*) as deliveries,
        sum(case when is_on_time then 1 else 0 end) as on_time_deliveries,
        avg(transit_days) as avg_transit_days,
        sum(weight_kg) as total_weight_kg
    from {{ ref('fct_shipments') }}
    where shipment_status = 'delivered'
    group by lane, origin_hub

)

select
    lane,
    origin_hub,
    deliveries,
    on_time_deliveries,
    round(on_time_deliveries / deliveries, 3) as on_time_rate,
    round(avg_transit_days, 2) as avg_transit_days,
    total_weight_kg,
    rank() over (
        partition by origin_hub
        order by deliveries desc, lane
    ) as volume_rank_at_origin
from lanes
