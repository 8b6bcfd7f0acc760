-- Visits are appointments that were attended or missed; each carries its clinician's
-- specialty and the money billed and collected for it (denied claims count for nothing).
with visits as (

    select * from {{ ref('stg_appointments') }}
    where appointment_status in ('completed', 'no_show')

),

billing as (

    select
        appointment_id,
        sum(billed_amount) as billed,
        sum(coalesce(paid_amount, 0)) as collected
    from {{ ref('stg_claims') }}
    where claim_status != 'denied'
    group by appointment_id

)

select
    visits.appointment_id,
    visits.patient_id,
    visits.clinician_id,
    clinicians.specialty,
    visits.visit_date,
    visits.starts_at,
    visits.booking_lead_days,
    visits.duration_minutes,
    visits.appointment_status,
    visits.visit_type,
    case
        when visits.visit_type = 'telehealth' then 'remote'
        else 'on_site'
    end as care_setting,
    coalesce(billing.billed, 0) as billed,
    coalesce(billing.collected, 0) as collected,
    coalesce(billing.billed, 0) - coalesce(billing.collected, 0) as balance_due
from visits
inner join {{ ref('raw_clinicians') }} as clinicians
    on visits.clinician_id = clinicians.clinician_id
left join billing
    on visits.appointment_id = billing.appointment_id
