{#- The first day of the calendar month that contains a date or timestamp, as a date.
    Renamed from month_start in 1.0.0. -#}
{% macro first_day_of_month(date_expr) -%}
    {{ return(adapter.dispatch('first_day_of_month', 'shop_calendar')(date_expr)) }}
{%- endmacro %}

{% macro default__first_day_of_month(date_expr) -%}
    cast(date_trunc('month', {{ date_expr }}) as date)
{%- endmacro %}
