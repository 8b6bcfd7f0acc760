{{ config(materialized='ephemeral') }}
select * from {{ ref('stg_orders') }} where status = 'shipped'
