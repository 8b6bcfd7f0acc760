-- Living patients (an unknown flag counts as alive) with their visits over the last 120
-- days, what they still owe, and an engagement tier.
with patients as (

    select * from {{ ref('stg_patients') }}
    where is_deceased is not true

),

recent as (

    select
        patient_id,
        count(*) as recent_visits,
        count(distinct clinician_id) as recent_clinicians,
        max(visit_date) as last_visit_date
    from {{ ref('fct_visits') }}
    where appointment_status = 'completed'
        and visit_date > current_date - interval 120 day
    group by patient_id

),

owed as (

    select
        patient_id,
        sum(balance_due) as balance_due
    from {{ ref('fct_visits') }}
    group by patient_id

)

select
    patients.patient_id,
    patients.patient_name,
    patients.insurance_plan,
    coalesce(recent.recent_visits, 0) as recent_visits,
    coalesce(recent.recent_clinicians, 0) as recent_clinicians,
    recent.last_visit_date,
    coalesce(owed.balance_due, 0) as balance_due,
    case
        when recent.recent_visits >= 3 then 'frequent'
        when recent.recent_visits >= 1 then 'regular'
        else 'dormant'
    end as engagement_tier
from patients
left join recent
    on patients.patient_id = recent.patient_id
left join owed
    on patients.patient_id = owed.patient_id
