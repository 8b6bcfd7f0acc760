-- Living patients who missed at least two visits in the last 90 days: the front desk
-- calls them before their next booking.
select
    visits.patient_id,
    patients.patient_name,
    count(*) as missed_visits,
    max(visits.visit_date) as last_missed_date
from {{ ref('fct_visits') }} as visits
inner join {{ ref('stg_patients') }} as patients
    on visits.patient_id = patients.patient_id
where visits.appointment_status = 'no_show'
    and visits.visit_date >= current_date - interval 90 day
    and patients.is_deceased is not true
group by visits.patient_id, patients.patient_name
having count(*) >= 2
