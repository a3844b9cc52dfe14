from __future__ import annotations

from django.urls import path

from . import views

urlpatterns = [
    path("", views.inference_list, name="inference_list"),
    path("consent/", views.inference_consent, name="inference_consent"),
    path("delete-all/", views.inference_delete_all, name="inference_delete_all"),
    path("<int:inference_id>/edit/", views.inference_edit, name="inference_edit"),
    path("<int:inference_id>/feedback/", views.inference_feedback, name="inference_feedback"),
    path("<int:inference_id>/delete/", views.inference_delete, name="inference_delete"),
]
